package decision

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var reportHTML string

// reportTemplate renders `report -o html`; html/template escapes every name
// taken from the records (pods, nodes, reasons).
var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{"seconds": seconds}).Parse(reportHTML))

// The chart's line colours (constants, hence safe as template.CSS).
const (
	actualColour template.CSS = "#d62728"
	planColour   template.CSS = "#1f77b4"
)

type htmlReport struct {
	Report
	Chart                    chart
	ActualColour, PlanColour template.CSS
}

// chart is the SVG line chart of actual and planned $/h over the window.
type chart struct {
	Width, Height, Left, Top, PlotWidth, PlotHeight int
	Right, LabelX, BottomLabelY                     int
	From, To                                        string
	Actual, Plan                                    string
	Ticks                                           []tick
}

type tick struct {
	Y     int
	Label string
}

// WriteHTML writes the report as a self-contained page (inline CSS and SVG,
// no scripts, no external assets).
func WriteHTML(w io.Writer, r Report) error {
	if err := reportTemplate.Execute(w, htmlReport{Report: r, Chart: newChart(r), ActualColour: actualColour, PlanColour: planColour}); err != nil {
		return fmt.Errorf("report: html: %w", err)
	}
	return nil
}

func newChart(r Report) chart {
	c := chart{Width: 760, Height: 260, Left: 70, Top: 10, PlotWidth: 670, PlotHeight: 210}
	c.Right, c.LabelX, c.BottomLabelY = c.Left+c.PlotWidth, c.Left-6, c.Top+c.PlotHeight+18
	c.From, c.To = r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339)
	top := 0.0
	for _, p := range r.Cost.Series {
		top = max(top, p.Actual, p.Plan)
	}
	if top == 0 {
		top = 1
	}
	top *= 1.1
	for i := range 5 {
		v := top * float64(i) / 4
		c.Ticks = append(c.Ticks, tick{Y: c.y(v, top) + 4, Label: fmt.Sprintf("$%.3f", v)})
	}
	span := r.Until.Sub(r.Since).Seconds()
	var actual, plan []string
	for _, p := range r.Cost.Series {
		x := c.Left
		if span > 0 {
			x += int(float64(c.PlotWidth) * p.At.Sub(r.Since).Seconds() / span)
		}
		actual = append(actual, fmt.Sprintf("%d,%d", x, c.y(p.Actual, top)))
		plan = append(plan, fmt.Sprintf("%d,%d", x, c.y(p.Plan, top)))
	}
	// One pass: a short level segment, so it shows as a line.
	if len(r.Cost.Series) == 1 {
		actual = append(actual, strings.Replace(actual[0], strings.Split(actual[0], ",")[0], fmt.Sprint(c.Right), 1))
		plan = append(plan, strings.Replace(plan[0], strings.Split(plan[0], ",")[0], fmt.Sprint(c.Right), 1))
	}
	c.Actual, c.Plan = strings.Join(actual, " "), strings.Join(plan, " ")
	return c
}

// y is the vertical position of value v on a scale up to top.
func (c chart) y(v, top float64) int {
	return c.Top + c.PlotHeight - int(float64(c.PlotHeight)*v/top)
}

package lambdaspec

import (
	"fmt"
	"strconv"
)

// number reads a template number: CDK writes most as JSON numbers, some
// (tokens resolved late) as numeric strings.
func number(v any) (int, error) {
	switch x := v.(type) {
	case float64:
		if x != float64(int(x)) {
			return 0, fmt.Errorf("%v is not a whole number", x)
		}
		return int(x), nil
	case string:
		n, err := strconv.Atoi(x)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%v (%T) is not a number", v, v)
}

// ref is the logical ID of {"Ref": id}, or "".
func ref(v any) string {
	m, _ := v.(map[string]any)
	id, _ := m["Ref"].(string)
	return id
}

// getAtt is the logical ID of {"Fn::GetAtt": [id, attr]}, or "".
func getAtt(v any, attr string) string {
	m, _ := v.(map[string]any)
	args, _ := m["Fn::GetAtt"].([]any)
	if len(args) != 2 || args[1] != attr {
		return ""
	}
	id, _ := args[0].(string)
	return id
}

// targets reports whether an EventBridge rule's properties target the
// function with logical ID fn.
func targets(p map[string]any, fn string) bool {
	ts, _ := p["Targets"].([]any)
	for _, t := range ts {
		m, _ := t.(map[string]any)
		if getAtt(m["Arn"], "Arn") == fn {
			return true
		}
	}
	return false
}

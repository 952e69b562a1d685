package cron

import (
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04 Mon", s)
	if err != nil {
		t2, err2 := time.Parse("2006-01-02 15:04", s)
		if err2 != nil {
			panic(err)
		}
		return t2
	}
	return t
}

func TestNext(t *testing.T) {
	cases := []struct {
		spec, from, want string
	}{
		{"0 9 * * MON-FRI", "2026-11-20 10:00", "2026-11-23 09:00"}, // Friday 10:00 -> Monday
		{"0 9 * * mon-fri", "2026-11-23 08:59", "2026-11-23 09:00"},
		{"0 9 * * 1-5", "2026-11-23 09:00", "2026-11-24 09:00"}, // strictly after
		{"*/15 * * * *", "2026-11-22 00:07", "2026-11-22 00:15"},
		{"5/20 * * * *", "2026-11-22 00:26", "2026-11-22 00:45"},
		{"0 2 * * *", "2026-11-22 02:00", "2026-11-23 02:00"},
		{"0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00"}, // leap day
		{"0 0 1,15 * *", "2026-11-02 00:00", "2026-11-15 00:00"},
		{"0 0 1 JAN *", "2026-06-01 00:00", "2027-01-01 00:00"},
		{"@daily", "2026-11-22 13:00", "2026-11-23 00:00"},
		{"@midnight", "2026-11-22 13:00", "2026-11-23 00:00"},
		{"@hourly", "2026-11-22 13:30", "2026-11-22 14:00"},
		{"@weekly", "2026-11-22 13:30", "2026-11-29 00:00"}, // 2026-11-22 is a Sunday
		{"@monthly", "2026-11-22 13:30", "2026-12-01 00:00"},
		{"@yearly", "2026-11-22 13:30", "2027-01-01 00:00"},
		{"@annually", "2026-11-22 13:30", "2027-01-01 00:00"},
		// Both day fields restricted: either matches (classic cron).
		{"0 0 13 * FRI", "2026-11-01 00:00", "2026-11-06 00:00"},
		// Day of month restricted, weekday unrestricted: day of month only.
		{"0 0 13 * *", "2026-11-01 00:00", "2026-11-13 00:00"},
		{"0 0 13 * ?", "2026-11-01 00:00", "2026-11-13 00:00"},
		{"0 9-17 * * 1-5", "2026-11-23 17:30", "2026-11-24 09:00"},
	}
	for _, tc := range cases {
		s, err := Parse(tc.spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.spec, err)
		}
		got := s.Next(at(tc.from))
		if !got.Equal(at(tc.want)) {
			t.Errorf("%q Next(%s) = %s, want %s", tc.spec, tc.from, got.Format("2006-01-02 15:04 Mon"), tc.want)
		}
	}
}

func TestNextNever(t *testing.T) {
	s, err := Parse("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(at("2026-01-01 00:00")); !got.IsZero() {
		t.Errorf("Feb 30 fired at %s", got)
	}
	if s.Active(at("2026-01-01 00:00"), time.Hour) {
		t.Error("never-firing schedule is active")
	}
}

func TestNextUsesUTC(t *testing.T) {
	s, _ := Parse("0 9 * * *")
	tz := time.FixedZone("UTC+9", 9*3600)
	from := time.Date(2026, 11, 22, 8, 0, 0, 0, tz) // 23:00 UTC the day before
	want := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	if got := s.Next(from); !got.Equal(want) {
		t.Errorf("got %s want %s", got, want)
	}
}

func TestActive(t *testing.T) {
	s, _ := Parse("0 9 * * MON-FRI")
	cases := []struct {
		now  string
		d    time.Duration
		want bool
	}{
		{"2026-11-23 08:59", 8 * time.Hour, false},
		{"2026-11-23 09:00", 8 * time.Hour, true},
		{"2026-11-23 16:59", 8 * time.Hour, true},
		{"2026-11-23 17:00", 8 * time.Hour, false}, // window is [09:00, 17:00)
		{"2026-11-22 10:00", 8 * time.Hour, false}, // Sunday
		{"2026-11-24 08:00", 24 * time.Hour, true}, // Monday's window still open
		{"2026-11-23 09:30", 0, false},
	}
	for _, tc := range cases {
		if got := s.Active(at(tc.now), tc.d); got != tc.want {
			t.Errorf("Active(%s, %s) = %v, want %v", tc.now, tc.d, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"":                    "empty schedule",
		"0 9 * *":             "expected 5 fields (minute hour day-of-month month day-of-week), got 4",
		"0 9 * * * *":         "expected 5 fields (minute hour day-of-month month day-of-week), got 6",
		"60 * * * *":          "minute: 60 is outside 0-59",
		"0 24 * * *":          "hour: 24 is outside 0-23",
		"0 0 0 * *":           "day of month: 0 is outside 1-31",
		"0 0 * 13 *":          "month: 13 is outside 1-12",
		"0 0 * * 7":           "day of week: 7 is outside 0-6",
		"0 0 * * FUNDAY":      `day of week: "FUNDAY" is not a number`,
		"0 17-9 * * *":        `hour: range "17-9" starts after it ends`,
		"*/0 * * * *":         `minute: bad step "0" in "*/0"`,
		"*/x * * * *":         `minute: bad step "x" in "*/x"`,
		"@every 5m":           `unknown descriptor "@every 5m" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)`,
		"TZ=UTC 0 9 * * *":    "time zones are not supported (schedules are UTC)",
		"CRON_TZ=UTC 0 9 * *": "time zones are not supported (schedules are UTC)",
		"0 0 * * 1,,2":        `day of week: "" is not a number`,
	}
	for spec, want := range cases {
		_, err := Parse(spec)
		if err == nil || err.Error() != want {
			t.Errorf("Parse(%q) = %v, want %q", spec, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0 9 * * MON-FRI", "@daily", "*/5 1-3,7 1 JAN-mar ?", "5/20 * 31 2 *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := Parse(spec)
		if err != nil {
			return
		}
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		next := s.Next(from)
		if !next.IsZero() && !next.After(from) {
			t.Fatalf("%q: Next(%s) = %s is not after", spec, from, next)
		}
	})
}

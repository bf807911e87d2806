package capture

import (
	"github.com/ptscope/ptscope/internal/report/rundir"

	"reflect"
	"strings"
	"testing"
)

func TestParseSchedule(t *testing.T) {
	tests := []struct {
		in   string
		want Schedule
		err  string
	}{
		{"wait=1,warmup=2,active=3,repeat=2", Schedule{Wait: 1, Warmup: 2, Active: 3, Repeat: 2}, ""},
		{"active=5", Schedule{Wait: 1, Warmup: 2, Active: 5, Repeat: 1}, ""},
		{"skip_first=10, wait=0,warmup=1,active=1,repeat=0", Schedule{SkipFirst: 10, Warmup: 1, Active: 1}, ""},
		{"", DefaultSchedule(), ""},
		{"active=0", Schedule{}, "active must be at least 1"},
		{"wait=-1", Schedule{}, "non-negative"},
		{"wait", Schedule{}, "key=value"},
		{"cycles=3", Schedule{}, "unknown key"},
	}
	for _, tt := range tests {
		got, err := ParseSchedule(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseSchedule(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSchedule(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if back, err := ParseSchedule(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q via %q = %+v, %v", tt.in, got.String(), back, err)
		}
	}
}

func TestParseRecordSteps(t *testing.T) {
	tests := []struct {
		in   string
		want RecordSteps
		err  string
	}{
		{"auto", RecordSteps{Mode: "auto"}, ""},
		{"", RecordSteps{Mode: "auto"}, ""},
		{"all", RecordSteps{Mode: "all"}, ""},
		{"50, 0-2", RecordSteps{Mode: "steps", Ranges: [][2]int{{0, 2}, {50, 50}}}, ""},
		{"3-3", RecordSteps{Mode: "steps", Ranges: [][2]int{{3, 3}}}, ""},
		{"-1", RecordSteps{}, "not a step number"},
		{"2-1", RecordSteps{}, "bad range"},
		{"some", RecordSteps{}, "not a step number"},
	}
	for _, tt := range tests {
		got, err := ParseRecordSteps(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseRecordSteps(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseRecordSteps(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if back, err := ParseRecordSteps(got.String()); err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("round trip of %q via %q = %+v, %v", tt.in, got.String(), back, err)
		}
	}
}

func TestParseSnapshotAt(t *testing.T) {
	tests := []struct {
		in   string
		want SnapshotAt
		err  bool
	}{
		{"end", SnapshotAt{End: true}, false},
		{"end,step:20", SnapshotAt{End: true, Steps: []int{20}}, false},
		{"step:100,step:5", SnapshotAt{Steps: []int{5, 100}}, false},
		{"none", SnapshotAt{}, false},
		{"", SnapshotAt{}, false},
		{"step:0", SnapshotAt{}, true},
		{"step:x", SnapshotAt{}, true},
		{"start", SnapshotAt{}, true},
	}
	for _, tt := range tests {
		got, err := ParseSnapshotAt(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("ParseSnapshotAt(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if !tt.err && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSnapshotAt(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseRanks(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		err  bool
	}{
		{"all", nil, false},
		{"", nil, false},
		{"0", []int{0}, false},
		{"3,0,1", []int{0, 1, 3}, false},
		{"0,2-4,3", []int{0, 2, 3, 4}, false},
		{"-1", nil, true},
		{"4-2", nil, true},
		{"a", nil, true},
		{"0-99999999", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseRanks(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("ParseRanks(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseRanks(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCommandName(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"python", "examples/transformer_lm.py", "--steps", "3"}, "transformer_lm"},
		{[]string{"python3", "-m", "torch.distributed.run", "--nproc-per-node", "2", "train.py"}, "train"},
		{[]string{"torchrun", "--nproc-per-node", "8", "-m", "mypkg.train"}, "mypkg.train"},
		{[]string{"python", "-m", "pkg"}, "pkg"},
		{[]string{"/usr/bin/bash", "run.sh"}, "bash"},
		{[]string{"script.py"}, "script.py"},
	}
	for _, tt := range tests {
		if got := CommandName(tt.argv); got != tt.want {
			t.Errorf("CommandName(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
	if got := rundir.SanitizeName("a b/c:d"); got != "a_b_c_d" {
		t.Errorf("SanitizeName = %q", got)
	}
	if got := rundir.SanitizeName("..."); got != "run" {
		t.Errorf("SanitizeName(...) = %q", got)
	}
}

func TestChildEnv(t *testing.T) {
	env := childEnv([]string{"HOME=/h", "PYTHONPATH=/a:/b", "PTSCOPE_BUNDLE=/old"}, "/comp", "/bundle", `{"x":1}`)
	want := []string{"HOME=/h", "PYTHONPATH=/comp:/a:/b", "PTSCOPE_BUNDLE=/bundle", `PTSCOPE_CONFIG={"x":1}`}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("childEnv = %q, want %q", env, want)
	}
	env = childEnv([]string{"PYTHONPATH="}, "/comp", "/b", "{}")
	if env[0] != "PYTHONPATH=/comp" {
		t.Errorf("empty PYTHONPATH: %q", env)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	if err := o.validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, mut := range []func(*Options){
		func(o *Options) { o.Stacks = "cpp" },
		func(o *Options) { o.MaxEntries = 0 },
		func(o *Options) { o.Interval = 0 },
		func(o *Options) { o.MaxSnapshotBytes = -1 },
	} {
		o := DefaultOptions()
		mut(&o)
		if o.validate() == nil {
			t.Errorf("validate accepted %+v", o)
		}
	}
	def := DefaultOptions()
	c := def.config()
	if c.Ranks == nil || c.SnapshotSteps == nil || len(c.SnapshotAt) != 1 || c.SnapshotAt[0] != "end" || c.IntervalS != 1 {
		t.Errorf("config() = %+v", c)
	}
}

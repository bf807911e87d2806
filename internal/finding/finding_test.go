package finding

import (
	"encoding/json"
	"testing"
)

func TestSeverityText(t *testing.T) {
	f := New("leak", Critical, Numbers{"bytes_per_step": 1 << 20}, "grows", "use loss.item()")
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"leak","severity":"critical","numbers":{"bytes_per_step":1048576},"message":"grows","recommendation":"use loss.item()"}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
	var back Finding
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Severity != Critical || back.Numbers["bytes_per_step"] != 1<<20 {
		t.Fatalf("round trip: %+v", back)
	}
	if err := json.Unmarshal([]byte(`{"severity":"fatal"}`), &back); err == nil {
		t.Fatal("unknown severity accepted")
	}
	if _, err := Severity(7).MarshalText(); err == nil {
		t.Fatal("invalid severity marshalled")
	}
}

func TestSortAndMax(t *testing.T) {
	fs := []Finding{{ID: "b", Severity: Info}, {ID: "z", Severity: Critical}, {ID: "a", Severity: Info}, {ID: "w", Severity: Warning}}
	Sort(fs)
	got := ""
	for _, f := range fs {
		got += f.ID
	}
	if got != "zwab" {
		t.Fatalf("order %q", got)
	}
	if Max(fs) != Critical || Max(nil) != Info {
		t.Fatal("Max")
	}
	if !Has(fs, "w") || Has(fs, "q") {
		t.Fatal("Has")
	}
}

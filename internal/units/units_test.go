package units

import "testing"

func TestBytes(t *testing.T) {
	cases := map[int64]string{
		0: "0 B", 512: "512 B", 1024: "1.00 KiB", 1536: "1.50 KiB",
		5538270208: "5.16 GiB", 1 << 20: "1.00 MiB", 150 << 20: "150 MiB",
		-3 << 20: "-3.00 MiB", 81559 << 20: "79.6 GiB",
	}
	for in, want := range cases {
		if got := Bytes(in); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	cases := map[string]int64{
		"80GiB": 80 << 30, "80 GB": 80e9, "1.5g": 3 << 29, "4096": 4096,
		"512MiB": 512 << 20, "2k": 2048, "1_000": 1000,
	}
	for in, want := range cases {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1", "x1", "1e400"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) succeeded, want error", bad)
		}
	}
}

func TestDuration(t *testing.T) {
	cases := map[int64]string{812: "812 ns", 35200: "35.2 us", 41_100_000: "41.1 ms", 3_200_000_000: "3.20 s"}
	for in, want := range cases {
		if got := Duration(in); got != want {
			t.Errorf("Duration(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestPercent(t *testing.T) {
	if got := Percent(0.934); got != "93.4%" {
		t.Errorf("Percent = %q", got)
	}
}

func TestCount(t *testing.T) {
	cases := map[int64]string{
		0: "0", 7: "7", 999: "999", 1000: "1,000", -123: "-123", -1000: "-1,000",
		8378: "8,378", 5538270208: "5,538,270,208", -9223372036854775808: "-9,223,372,036,854,775,808",
	}
	for in, want := range cases {
		if got := Count(in); got != want {
			t.Errorf("Count(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 ranks"}, {1, "1 rank"}, {2, "2 ranks"}, {1000, "1,000 ranks"}} {
		if got := Plural(c.n, "rank", "ranks"); got != c.want {
			t.Errorf("Plural(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

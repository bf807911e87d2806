package capture

import (
	"reflect"
	"testing"
)

// TestMaskArgv: values that look like secrets are masked, by their
// option's or variable's name or by their shape; the rest of the command
// line stays as it was.
func TestMaskArgv(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"python", "train.py", "--lr", "3e-4", "--epochs=3"}, []string{"python", "train.py", "--lr", "3e-4", "--epochs=3"}},
		{[]string{"python", "train.py", "--hf-token", "abc123", "--lr", "1"}, []string{"python", "train.py", "--hf-token", Masked, "--lr", "1"}},
		{[]string{"torchrun", "t.py", "--api_key=abc", "-password=x", "--wandb-api-key", "k"}, []string{"torchrun", "t.py", "--api_key=" + Masked, "-password=" + Masked, "--wandb-api-key", Masked}},
		{[]string{"env", "HF_TOKEN=abc", "AWS_SECRET_ACCESS_KEY=x", "PATH=/bin", "python"}, []string{"env", "HF_TOKEN=" + Masked, "AWS_SECRET_ACCESS_KEY=" + Masked, "PATH=/bin", "python"}},
		{[]string{"python", "t.py", "hf_abcdefghijklmnopqrstuvwxyz", "--key=sk-abcdefghijklmnopqrstuvwx", "AKIAABCDEFGHIJKLMNOP"}, []string{"python", "t.py", Masked, "--key=" + Masked, Masked}},
		{[]string{"python", "t.py", "--data", "https://bob:hunter2@example.com/d.tar", "s3://bucket/x"}, []string{"python", "t.py", "--data", "https://bob:" + Masked + "@example.com/d.tar", "s3://bucket/x"}},
		{[]string{"python", "t.py", "--token", "--verbose"}, []string{"python", "t.py", "--token", "--verbose"}},
	} {
		if got := MaskArgv(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

package capture

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
)

// Masked replaces an argument, or the value in one, that looks like a
// secret.
const Masked = "***"

// secretName matches the names of options and variables whose values are
// secrets: --hf-token, --api_key, --password, WANDB_API_KEY, AWS_SECRET...
var secretName = regexp.MustCompile(`(?i)(token|secret|passw|passwd|pwd|api[-_]?key|access[-_]?key|private[-_]?key|auth|credential|cookie|session[-_]?id)`)

// secretValue matches values that are secrets by their shape: the tokens
// of Hugging Face, OpenAI, GitHub, GitLab, Slack, AWS access keys, Google
// API keys, JSON Web Tokens.
var secretValue = regexp.MustCompile(`^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|xox[abpors]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*)$`)

// MaskArgv returns a copy of argv, as the bundle keeps it without
// --keep-argv, where what looks like a secret is replaced by Masked:
//
//   - the value of an option whose name looks like a secret's (secretName):
//     --hf-token=X and -p=X become --hf-token=***, and the argument after
//     --hf-token (or -token, ...) becomes *** unless it is an option itself;
//   - the value of an assignment NAME=X whose name does (as `env` passes
//     them): HF_TOKEN=***;
//   - an argument, or an option's value, shaped like a known token
//     (secretValue: hf_..., sk-..., ghp_..., AKIA..., a JWT, ...);
//   - the password of a URL (https://user:***@host/...).
func MaskArgv(argv []string) []string {
	out := make([]string, len(argv))
	next := false // the previous argument was a secret option without =
	for i, a := range argv {
		switch {
		case next && !strings.HasPrefix(a, "-"):
			a = Masked
		case strings.HasPrefix(a, "-"):
			name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if hasVal && (secretName.MatchString(name) || secretValue.MatchString(val)) {
				a = a[:len(a)-len(val)] + Masked
			} else if hasVal {
				a = a[:len(a)-len(val)] + maskURL(val)
			}
		case secretValue.MatchString(a):
			a = Masked
		default:
			if name, val, ok := strings.Cut(a, "="); ok && i > 0 && isVarName(name) && (secretName.MatchString(name) || secretValue.MatchString(val)) {
				a = name + "=" + Masked
			} else {
				a = maskURL(a)
			}
		}
		next = false
		if strings.HasPrefix(argv[i], "-") && !strings.Contains(argv[i], "=") && secretName.MatchString(strings.TrimLeft(argv[i], "-")) {
			next = true
		}
		out[i] = a
	}
	return out
}

// isVarName reports whether s is an environment variable's name.
func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// maskURL masks the password of a URL with user information.
func maskURL(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); !ok {
		return s
	}
	u.User = url.UserPassword(u.User.Username(), Masked)
	return strings.Replace(u.String(), url.QueryEscape(Masked), Masked, 1)
}

// maskArgvFiles masks the argv the companion wrote into the bundle (each
// rank's process.json, the .ptscope/proc markers) as MaskArgv masks the
// command: the Python side writes sys.argv as it is.
func maskArgvFiles(dir string) {
	var files []string
	for _, pat := range []string{"*/process.json", ".ptscope/proc/*.json"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), `"argv"`) {
			continue
		}
		var rec map[string]json.RawMessage
		if json.Unmarshal(b, &rec) != nil {
			continue
		}
		var argv []string
		if json.Unmarshal(rec["argv"], &argv) != nil {
			continue
		}
		masked, _ := json.Marshal(MaskArgv(argv))
		rec["argv"] = masked
		out, err := json.MarshalIndent(rec, "", " ")
		if err != nil {
			continue
		}
		_ = bundle.WriteFileAtomic(f, append(out, '\n'))
	}
}

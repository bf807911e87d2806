// Package envelope is the header every --json document opens with
// (docs/json.md). Results embed Header so that its fields come first and at
// the top level; the analyses that make them (memory, perf, estimate, diff,
// fleet) import this leaf package, not the renderers.
package envelope

// SchemaVersion is the version of every --json document (docs/json.md).
const SchemaVersion = 2

// Tool is the "tool" field of every --json document.
const Tool = "ptscope"

// Header opens every --json document. Results embed it so that its fields
// come first and at the top level:
//
//	{"schema_version": 2, "tool": "ptscope", "command": "analyze", ...}
type Header struct {
	SchemaVersion int    `json:"schema_version"`
	Tool          string `json:"tool"`
	Command       string `json:"command"`
}

// NewHeader returns the header of a command's document.
func NewHeader(command string) Header {
	return Header{SchemaVersion: SchemaVersion, Tool: Tool, Command: command}
}

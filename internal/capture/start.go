package capture

// StartError is a command that could not be started, with the exit status
// a shell gives for it: 127 when it is not there (or its #! interpreter or
// loader is not), 126 when it is there but cannot be executed.
type StartError struct {
	Name   string // argv[0]
	Reason string
	Code   int
	Err    error
}

func (e *StartError) Error() string { return e.Name + ": " + e.Reason }

// Unwrap gives ErrNotFound for a command that is not there, else the cause.
func (e *StartError) Unwrap() error {
	if e.Code == 127 && e.Err == nil {
		return ErrNotFound
	}
	return e.Err
}

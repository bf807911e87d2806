package pickle

// Protocol tells from a file's first bytes whether it looks like a pickle
// of a dict or a list, and of which protocol: 2 to 5 open with PROTO;
// protocol 1 with EMPTY_DICT or EMPTY_LIST, protocol 0 with MARK and DICT
// or LIST (no JSON document or text starts so). ok is false otherwise.
func Protocol(head []byte) (protocol int, ok bool) {
	switch {
	case len(head) >= 2 && head[0] == opProto && head[1] >= 2 && head[1] <= 5:
		return int(head[1]), true
	case len(head) >= 1 && (head[0] == opEmptyDict || head[0] == opEmptyList):
		return 1, true
	case len(head) >= 2 && head[0] == opMark && (head[1] == opDict || head[1] == opList):
		return 0, true
	}
	return 0, false
}

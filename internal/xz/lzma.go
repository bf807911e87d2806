package xz

// The LZMA decoder of LZMA2 chunks: a range decoder over the chunk's
// packed bytes, the adaptive probabilities, and the sliding dictionary.
// Names follow the LZMA SDK's decoder (LzmaDec.c) and the xz format's
// description of LZMA2; the logic is the reference decoder's, written
// for streaming into a caller's buffer: a match cut by the end of that
// buffer is kept (pendingLen) and finished by the next call.

const (
	numStates       = 12
	posStatesMax    = 1 << 4
	lenLowBits      = 3
	lenMidBits      = 3
	lenHighBits     = 8
	lenLowSymbols   = 1 << lenLowBits
	lenMidSymbols   = 1 << lenMidBits
	matchMinLen     = 2
	lenToPosStates  = 4
	posSlotBits     = 6
	startPosModel   = 4
	endPosModel     = 14
	fullDistances   = 1 << (endPosModel >> 1)
	alignBits       = 4
	probInit        = 1 << 10
	literalCoderLen = 0x300
)

// rangeDecoder decodes bits from a chunk's packed bytes; reading past
// them is an error (corrupt input), reported once the symbol ends.
type rangeDecoder struct {
	in    []byte
	pos   int
	rng   uint32
	code  uint32
	over  bool // read past the packed bytes
	first byte
}

func (rc *rangeDecoder) init(in []byte) bool {
	if len(in) < 5 {
		return false
	}
	rc.in, rc.pos, rc.over = in, 5, false
	rc.first = in[0]
	rc.rng = 0xFFFFFFFF
	rc.code = uint32(in[1])<<24 | uint32(in[2])<<16 | uint32(in[3])<<8 | uint32(in[4])
	return rc.first == 0
}

func (rc *rangeDecoder) next() uint32 {
	if rc.pos >= len(rc.in) {
		rc.over = true
		return 0
	}
	b := rc.in[rc.pos]
	rc.pos++
	return uint32(b)
}

// bit decodes one bit with the adaptive probability *p (kept small enough
// to inline: the decoder's hot path).
func (rc *rangeDecoder) bit(p *uint16) uint32 {
	bound := (rc.rng >> 11) * uint32(*p)
	if rc.code < bound {
		rc.rng = bound
		*p += (1<<11 - *p) >> 5
		if rc.rng < 1<<24 {
			rc.normalize()
		}
		return 0
	}
	rc.rng -= bound
	rc.code -= bound
	*p -= *p >> 5
	if rc.rng < 1<<24 {
		rc.normalize()
	}
	return 1
}

func (rc *rangeDecoder) normalize() {
	rc.rng <<= 8
	rc.code = rc.code<<8 | rc.next()
}

func (rc *rangeDecoder) direct(n uint) uint32 {
	var v uint32
	for ; n > 0; n-- {
		rc.rng >>= 1
		var b uint32
		if rc.code >= rc.rng {
			rc.code -= rc.rng
			b = 1
		}
		v = v<<1 | b
		if rc.rng < 1<<24 {
			rc.rng <<= 8
			rc.code = rc.code<<8 | rc.next()
		}
	}
	return v
}

// tree decodes n bits, most significant first, with probs[1:1<<n].
func (rc *rangeDecoder) tree(probs []uint16, n uint) uint32 {
	m := uint32(1)
	for i := uint(0); i < n; i++ {
		m = m<<1 | rc.bit(&probs[m])
	}
	return m - 1<<n
}

// reverse decodes n bits, least significant first, with probs[1:1<<n].
func (rc *rangeDecoder) reverse(probs []uint16, n uint) uint32 {
	m, v := uint32(1), uint32(0)
	for i := uint(0); i < n; i++ {
		b := rc.bit(&probs[m])
		m = m<<1 | b
		v |= b << i
	}
	return v
}

// lenDecoder decodes match lengths (0-based, before matchMinLen).
type lenDecoder struct {
	choice, choice2 uint16
	low             [posStatesMax][lenLowSymbols]uint16
	mid             [posStatesMax][lenMidSymbols]uint16
	high            [1 << lenHighBits]uint16
}

func (l *lenDecoder) reset() {
	l.choice, l.choice2 = probInit, probInit
	for i := range l.low {
		for j := range l.low[i] {
			l.low[i][j], l.mid[i][j] = probInit, probInit
		}
	}
	for i := range l.high {
		l.high[i] = probInit
	}
}

func (l *lenDecoder) decode(rc *rangeDecoder, posState uint32) uint32 {
	if rc.bit(&l.choice) == 0 {
		return rc.tree(l.low[posState][:], lenLowBits)
	}
	if rc.bit(&l.choice2) == 0 {
		return lenLowSymbols + rc.tree(l.mid[posState][:], lenMidBits)
	}
	return lenLowSymbols + lenMidSymbols + rc.tree(l.high[:], lenHighBits)
}

// props are an LZMA chunk's literal context, literal position and
// position bits.
type props struct{ lc, lp, pb uint }

func decodeProps(b byte) (props, bool) {
	if b >= 9*5*5 {
		return props{}, false
	}
	p := props{lc: uint(b % 9)}
	b /= 9
	p.lp, p.pb = uint(b%5), uint(b/5)
	return p, p.lc+p.lp <= 4
}

// lzma is the decoder's state that lasts across LZMA2 chunks.
type lzma struct {
	props
	state               uint32
	rep                 [4]uint32
	isMatch, isRep0Long [numStates << 4]uint16
	isRep, isRepG0      [numStates]uint16
	isRepG1, isRepG2    [numStates]uint16
	posSlot             [lenToPosStates][1 << posSlotBits]uint16
	posSpecial          [1 + fullDistances - endPosModel]uint16
	align               [1 << alignBits]uint16
	lenDec, repLenDec   lenDecoder
	literal             []uint16
	pendingLen          uint32 // bytes of the last match not yet copied (from rep[0])
}

// resetState sets the probabilities, state and distances to their start.
func (z *lzma) resetState() {
	z.state = 0
	z.rep = [4]uint32{}
	for _, ps := range [][]uint16{z.isMatch[:], z.isRep0Long[:], z.isRep[:], z.isRepG0[:], z.isRepG1[:], z.isRepG2[:], z.posSpecial[:], z.align[:]} {
		for i := range ps {
			ps[i] = probInit
		}
	}
	for i := range z.posSlot {
		for j := range z.posSlot[i] {
			z.posSlot[i][j] = probInit
		}
	}
	z.lenDec.reset()
	z.repLenDec.reset()
	n := literalCoderLen << (z.lc + z.lp)
	if cap(z.literal) < n {
		z.literal = make([]uint16, n)
	}
	z.literal = z.literal[:n]
	for i := range z.literal {
		z.literal[i] = probInit
	}
	z.pendingLen = 0
}

package erasure

// Skips is what a chunk of a job's items must leave out because of a
// permanent deletion: the items the erasure redacted in its input
// (async.EraseInputs), and the subjects of the project's erasures not finished,
// whose values an item the job read before the erasure may still hold.
// Read in the chunk's transaction, it sees one or the other: an erasure
// that committed before the chunk's snapshot has marked the items, one
// that did not is still unfinished there.
type Skips struct {
	marked   map[int]bool
	subjects []Subject
}

// NewSkips is the skips of a job's items: those marked (by their index)
// and those that name one of subjects.
func NewSkips(marked map[int]bool, subjects []Subject) Skips {
	return Skips{marked: marked, subjects: subjects}
}

// Marked says whether the erasure redacted item i.
func (s Skips) Marked(i int) bool { return s.marked[i] }

// Doc says whether item i, a JSON document, must be left out: it was
// redacted, or it names a customer being erased (Subject.Redact would
// change it).
func (s Skips) Doc(i int, doc []byte) bool {
	if s.marked[i] {
		return true
	}
	for _, subj := range s.subjects {
		if _, did, err := subj.Redact(doc); did || err != nil {
			return true
		}
	}
	return false
}

// Fields is Doc for item i, a CSV row: one of its fields is or holds a
// value of a customer being erased, or is their id.
func (s Skips) Fields(i int, fields []string) bool {
	if s.marked[i] {
		return true
	}
	for _, subj := range s.subjects {
		for _, f := range fields {
			if subj.Names(f) {
				return true
			}
		}
	}
	return false
}

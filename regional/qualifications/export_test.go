package qualifications

// FullEvaluation makes qualifications judge every tier, unscreened, while
// set; JudgedTiers counts the tiers judged.
var (
	FullEvaluation = &fullEvaluation
	JudgedTiers    = &judgedTiers
)

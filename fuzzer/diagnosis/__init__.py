"""Diagnosis: whose bug a case is (the cross-checks and the evidence of its converted model, blame), since when (the
bisection across releases), what edit of the converted model repairs it and which setting avoids it. Used by the
campaign's cases, the reducer and `convsmith check` on a user's model; above the case it reads and writes."""

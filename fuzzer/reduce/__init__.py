"""The reducer: a shrinker with one acceptance point, and its passes."""

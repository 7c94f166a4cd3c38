"""Triage of a campaign: findings grouped into root causes, known bugs set apart, the report page."""

"""wow-temporal: Wow-style scheduled commands and recurring jobs, run durably on Temporal."""

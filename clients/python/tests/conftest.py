"""The client's tests start real runs: they need the roam binary ($ROAM_BINARY or --roam-binary)."""

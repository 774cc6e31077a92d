"""`envkit create`: from the selected build to a working, verified, recorded environment."""

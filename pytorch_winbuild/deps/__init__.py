"""MKL and MAGMA for PyTorch's Windows builds: catalog, download, verified and safe extraction, cache.

`catalog.select_archives` says which archives a build needs, `fetch.fetch_archives` makes them
present in the cache, and `cache.installed_path` tells the build plan where a trusted copy is.
"""

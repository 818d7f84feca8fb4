"""The GitHub adapter: the REST client with App auth, and the fork-facing forge."""

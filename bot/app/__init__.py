"""The application: the aiohttp service, the workers, settings, the CLI."""

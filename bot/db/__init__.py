"""The database adapter: the store, the durable job queue, leases, the fork registry, migrations."""

"""Webhook event and slash-command handlers (one module each)."""

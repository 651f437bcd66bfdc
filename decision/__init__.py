"""The iamgate decision service: a sidecar answering authorization checks from a local cache."""

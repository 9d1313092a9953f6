"""Benchmarks: build time and memory per stage, retrieval recall and latency. Never part of `make test`."""

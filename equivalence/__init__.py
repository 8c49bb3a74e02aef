"""The exactness harness: input-class strategies, corpora, and differential comparison.

Shared by tokbackend's own tests, `bench/`, and `tokbackend verify`.
"""

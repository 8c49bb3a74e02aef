"""Process utilities: fork safety, threads, exit, memory, the background preload."""

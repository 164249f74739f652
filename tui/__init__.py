"""The Textual terminal explorer over a pt2pt-kit dataset and its models."""

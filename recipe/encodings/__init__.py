"""Model-family encodings: Conversation -> prompt segments, and completion tokens -> output events."""

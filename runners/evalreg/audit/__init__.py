"""The audit record: who changed what a decision rests on, commit by commit."""

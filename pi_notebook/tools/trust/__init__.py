"""Trust: the approval gate and its policy, secret redaction, credentials by their shape."""

"""CDC events: the wire formats (Debezium, canal-json, maxwell-json), the one internal
form every format decodes to, and the dead-letter form of what cannot be decoded."""

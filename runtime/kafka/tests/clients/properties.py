"""Reads a librdkafka-format properties file (KEY=VALUE lines, # comments), as
`isr cluster --security` writes it, for the secure_*.py clients."""


def read(path):
    props = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
    return props

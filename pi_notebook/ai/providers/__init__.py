"""Wire-API adapters and the faux test provider."""

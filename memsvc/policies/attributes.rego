# Attribute extraction: plaintext attributes stored with a memory on every write.
# Default: {"namespace": ns[0], "sub": ns[1]}, without `sub` for a one-segment namespace.
package memories.attributes

default attributes := {}

attributes := {"namespace": input.namespace[0], "sub": input.namespace[1]} if {
	count(input.namespace) >= 2
} else := {"namespace": input.namespace[0]} if {
	count(input.namespace) == 1
}

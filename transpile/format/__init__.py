"""The Paddle ProgramDesc wire format and our JSON text form: reading (protoread, with the op
and var byte sources of opsource), writing (protowrite), the schema (proto), the wire
primitives both share (wire), the JSON text form (textform), load and save by file extension
(programio)."""

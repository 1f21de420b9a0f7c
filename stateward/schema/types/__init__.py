"""Strawberry object types of the public contract (DESIGN §10), one small module per area.

Each type maps from a domain value or a persistence record through a `from_domain` /
`from_record` constructor; resolvers never build them field by field.
"""

"""The pure domain: DSL v2 definitions, expressions, mutations, forms and the engine.

Owns every workflow rule. Must not import anything of the project outside itself, and
never does I/O, reads a clock or draws randomness: same inputs, same outputs, always.
"""

"""People, not accounts, and what they said.

* :mod:`people.directory`: every platform account maps to a person; linking merges accounts into one.
* :mod:`people.history`: the message log of every thread and each thread's rolling summary.
"""

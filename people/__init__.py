"""People, not accounts, and what they said.

* :mod:`people.directory`: every platform account maps to a person; linking merges accounts into one.
* :mod:`people.moves`: a link's move of everything kept about the person it left, recorded with the link until
  it is done, and finished at the next start if a process stopped first.
* :mod:`people.history`: the message log of every thread and each thread's rolling summary.
"""

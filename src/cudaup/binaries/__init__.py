"""CUDA binaries where they are: which GPU code files, wheels and environments carry.

The byte parser is :mod:`cudaup.core.fatbin` and the rule of what runs where is
:mod:`cudaup.core.gpus`; :mod:`.read` opens files, wheels and remote wheels, and
:mod:`.coverage` answers, per GPU, which packages carry kernels for it.
"""

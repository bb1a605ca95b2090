"""Pure values and rules: version requests, platforms (the one table), components,
the result model, driver facts, compatibility and release identification.

Nothing here does network or disk I/O beyond reading cudaup's own data files, so
every rule is tested by feeding it values (an import-contract test checks that no
module here imports an I/O package).
"""

from cudaup.cli import run

run()

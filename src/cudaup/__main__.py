from cudaup.cli import main

raise SystemExit(main())

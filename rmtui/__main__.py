from rmtui.cli import main

raise SystemExit(main())

from supplyline.cli import main

raise SystemExit(main())

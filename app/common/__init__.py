"""What every surface shares about user input, each in one place: the defaults and limits the
CLI, the REST API and the README state (``options``), names and free text (``names``), numbers
(``numbers``), date-times (``timebounds``) and URLs whose credentials are never shown
(``urls``). These import nothing of the service but :mod:`app.errors`, so the CLI can read
them at start-up."""

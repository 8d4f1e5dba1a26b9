"""What the tests share: servers, processes, polls, the e-shop stack."""

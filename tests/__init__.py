"""The suite by tier directory (unit/, workflow/, system/, bench/), with helpers/ and apps/."""

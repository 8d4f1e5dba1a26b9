"""The spec's e-shop: the inventory's morning job (`workers.eshop.inventory:app`)."""

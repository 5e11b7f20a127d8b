"""One module per page's own view (Why, Learn, Translate, Explore's long view and comparison), on the kit."""

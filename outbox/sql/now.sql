select @now@
